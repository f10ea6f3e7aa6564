"""Options that several commands share: where the cluster is."""

from __future__ import annotations

import argparse
from pathlib import Path


def cluster_options(parser: argparse._ActionsContainer) -> None:
    """`--kubeconfig` and `--context` (read by `kube.client.load_credentials`), on a parser or a group of one."""
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, "
                        "then the in-cluster service account)")
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")
