"""The ports of one control plane's processes are different ports, even when the random choice repeats."""

from __future__ import annotations

import random

import pytest

from admission.localcluster.controlplane import allocate_ports, free_ports


def test_ports_chosen_together_are_different_when_the_draw_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(random, "sample", lambda population, k: [26219] * k)  # every draw the same port
    ports = free_ports(5)
    assert len(set(ports)) == 5
    assert ports[0] == 26219


def test_a_control_plane_never_gives_two_components_one_port(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = iter([[26219, 26220] * 32, [26219] * 64, [26220, 26219] * 32, [26221] * 64, [26219] * 64])
    monkeypatch.setattr(random, "sample", lambda population, k: next(draws))
    ports = allocate_ports()
    chosen = [ports.etcd_client, ports.etcd_peer, ports.apiserver, ports.controller_manager, ports.scheduler]
    assert len(set(chosen)) == 5, chosen
