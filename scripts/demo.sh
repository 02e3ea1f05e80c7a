#!/usr/bin/env bash
# Render the default project and run its main job on CPU: train the tiny model, then generate.
# Usage: bash scripts/demo.sh [DEST]   (DEST defaults to ./my-model; it must not exist yet)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-my-model}"

if [ ! -x "$root/.venv/bin/python" ]; then
    python3 -m venv "$root/.venv"
    "$root/.venv/bin/python" -m pip install --quiet --upgrade pip
    "$root/.venv/bin/python" -m pip install --quiet "torch==2.13.0" -e "$root[test]"
fi
py="$root/.venv/bin/python"

"$py" -m tmd new "$dest" --defaults --template "$root" --vcs-ref HEAD --quiet
cd "$dest"
"$py" -m pip install --quiet --no-deps -e .
"$py" -m my_model train
"$py" -m my_model generate --config configs/default.toml generate.max_new_tokens=200
