"""`draq run` started as a process by an end-to-end test: its probe port, its log, and its stop."""

from __future__ import annotations

import signal
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass
class DraqProcess:
    process: subprocess.Popen[bytes]
    log: Path
    metrics_port: int

    def get(self, path: str) -> tuple[int, str]:
        """The status and body of a GET on the metrics and probe port; 0 when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=5) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()
        except OSError as err:  # URLError too
            return 0, str(err)

    def stop(self, signum: signal.Signals = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
