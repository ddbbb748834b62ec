#!/usr/bin/env bash
# Installs what MSA Engine needs on a Debian 12 machine, and nothing that is already there.
#   scripts/setup.sh          runtime and build dependencies (what `make serve` needs)
#   scripts/setup.sh --test   also the test-only dependencies (Python oracles, npm clients and tokenizers)
# Every dependency is a Debian package (apt) or, for tests only, an npm package pinned in tests/npm/package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/.."

want_tests=0
[[ "${1:-}" == "--test" ]] && want_tests=1

build_packages=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libcpp-httplib-dev libssl-dev
  libpcre2-dev libutf8proc-dev libopenblas-dev libopenblas0-pthread libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
)
test_packages=(
  python3 python3-numpy python3-torch python3-jinja2 python3-requests python3-prometheus-client python3-pytest
  nodejs npm clang-14 libclang-rt-14-dev
  bible-kjv bible-kjv-text fortunes fortunes-zh fortunes-ru jargon-text unicode-data
)

packages=("${build_packages[@]}")
(( want_tests )) && packages+=("${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  # nodejs/npm may come from outside Debian (e.g. NodeSource); accept any working node >= 20.
  if [[ "$p" == nodejs || "$p" == npm ]] && command -v "${p/nodejs/node}" >/dev/null 2>&1; then continue; fi
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if (( ${#missing[@]} )); then
  echo "setup: installing ${#missing[@]} missing Debian packages: ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} Debian packages present"
fi

if (( want_tests )) && [[ -f tests/npm/package.json ]]; then
  # npm ci only when the installed tree does not match the lock file.
  stamp=tests/npm/node_modules/.msa-lock-stamp
  if [[ ! -f "$stamp" ]] || ! cmp -s tests/npm/package-lock.json "$stamp"; then
    echo "setup: installing pinned npm test packages (tests/npm/package-lock.json)"
    (cd tests/npm && npm ci --no-audit --no-fund --loglevel=error)
    cp tests/npm/package-lock.json "$stamp"
  else
    echo "setup: npm test packages present"
  fi
fi
