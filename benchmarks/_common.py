"""What every benchmark script shares: the machine description and writing a Markdown result."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import torch

RESULTS = Path(os.environ.get("BENCH_RESULTS", Path(__file__).resolve().parent / "results"))


def machine(device: torch.device | None = None, threads: bool = True) -> str:
    """One line: CPU, cores, Python, torch, and the GPU when one is used."""
    line = (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"torch {torch.__version__}, {platform.system()}")
    if threads and (device is None or device.type == "cpu"):
        line += f", {torch.get_num_threads()} torch thread(s)"
    if device is not None and device.type == "cuda":
        line += f", GPU {torch.cuda.get_device_name(device)}"
    return line


def write_result(name: str, title: str, body: str, device: torch.device | None = None, threads: bool = True) -> Path:
    """Write ``results/<name>.md`` with a header naming the date and the machine; return its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.md"
    text = f"# {title} ({time.strftime('%Y-%m-%d')})\n\nMachine: {machine(device, threads)}.\n\n{body.strip()}\n"
    path.write_text(text)
    return path
