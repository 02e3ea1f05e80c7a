#!/usr/bin/env bash
# Render the default project and run its main job on CPU: train the tiny model, then generate.
# Usage: bash scripts/demo.sh [DEST]   (DEST defaults to ./my-model; it must not exist yet)
#
# The project is named after DEST's folder, rendered from the template's newest release (or its
# HEAD when it has no release tags), and committed to a git repository of its own, so that
# `tmd update DEST` works on it straight away.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-my-model}"

if [ ! -x "$root/.venv/bin/python" ]; then
    python3 -m venv "$root/.venv"
    "$root/.venv/bin/python" -m pip install --quiet --upgrade pip
    "$root/.venv/bin/python" -m pip install --quiet "torch==2.13.0" -e "$root[test]"
fi
py="$root/.venv/bin/python"

# A project rendered inside the template's checkout must not make the checkout dirty: later
# renders from HEAD would then record a commit that exists nowhere. Git is told to ignore it,
# in this clone only (.git/info/exclude).
mkdir -p "$(dirname "$dest")"
dest_abs="$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")"
if [[ "$dest_abs/" == "$root"/* ]] && git_dir="$(git -C "$root" rev-parse --absolute-git-dir 2> /dev/null)"; then
    mkdir -p "$git_dir/info"
    echo "/${dest_abs#"$root"/}/" >> "$git_dir/info/exclude"
fi

"$py" -m tmd new "$dest_abs" --defaults --template "$root" --quiet
cd "$dest_abs"
package="$("$py" -c "import yaml; print(yaml.safe_load(open('.copier-answers.yml'))['package_name'])")"

# tmd commits a render outside any repository itself; one inside the checkout gets its own.
if [ ! -d .git ]; then
    git init --quiet
    git add --all
    identity=()
    git config user.email > /dev/null || identity=(-c user.name="tmd demo" -c user.email="demo@tmd.invalid")
    git "${identity[@]}" commit --quiet --message "Render $package with tmd"
fi

"$py" -m pip install --quiet --no-deps -e .
"$py" -m "$package" train
"$py" -m "$package" generate generate.max_new_tokens=200
