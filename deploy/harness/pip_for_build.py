"""Print the `podman build` options that let pip inside a build fetch packages
the way pip on this host does: the host's effective pip settings (config
files and PIP_* variables) are written to a pip.conf in OUT_DIR, which is
bind-mounted at /etc/pip.conf for the build only, with every local path it
names (CA bundle, constraints, wheel folders, file:// indexes) bind-mounted
read-only at the same place. Nothing of it lands in the final image: the
mounts exist only while a RUN step runs.

  python3 deploy/harness/pip_for_build.py OUT_DIR   # one option per line
"""

import os
import subprocess
import sys
from pathlib import Path

KEYS = ("index-url", "extra-index-url", "find-links", "cert", "constraint", "trusted-host", "timeout", "no-index")


def effective() -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    found: dict[str, str] = {}
    env: dict[str, str] = {}
    for line in out.splitlines():
        name, _, value = line.partition("=")
        section, _, key = name.rpartition(".")
        value = value.strip().strip("'\"")
        if key in KEYS:
            (env if section.startswith(":env:") else found)[key] = value
    found.update(env)  # PIP_* variables win over files, as in pip
    return found


def local_paths(value: str) -> list[str]:
    paths = []
    for part in value.split():
        path = part.removeprefix("file://")
        if path.startswith("/") and os.path.exists(path):
            # A local "simple" index links to its files beside it (../../files/...).
            paths.append(str(Path(path).parent) if Path(path).name == "simple" else path)
    return paths


def main(out_dir: str) -> None:
    settings = effective()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["[global]"] + [f"{key} = {value}" for key, value in settings.items()]
    (out / "pip.conf").write_text("\n".join(lines) + "\n")
    mounts = {str(out / "pip.conf"): "/etc/pip.conf"}
    for value in settings.values():
        for path in local_paths(value):
            mounts[path] = path
    for source, target in mounts.items():
        print(f"--volume={source}:{target}:ro")


if __name__ == "__main__":
    main(sys.argv[1])
