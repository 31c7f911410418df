#!/usr/bin/env bash
# Whole-process time and peak memory of `tau version` (target: <= 5 ms, <= 10 MiB).
# Builds the release binaries, installs hyperfine from Debian's packages when it is missing, and
# prints hyperfine's summary plus the peak RSS reported by GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p tau-cli -p taud
if ! command -v hyperfine >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get install -y hyperfine >/dev/null
fi
bin="${CARGO_TARGET_DIR:-target}/release"
export TAU_HOME="$(mktemp -d)" TAU_DATA_DIR="$(mktemp -d)"
hyperfine --warmup 20 --runs 300 -N "$bin/tau version"
if [ -x /usr/bin/time ]; then
  /usr/bin/time -f 'peak RSS: %M KiB' "$bin/tau" version >/dev/null
else
  echo "peak RSS: /usr/bin/time is not installed (apt-get install time)"
fi
