#!/usr/bin/env bash
# CI: a single-node SLURM for tests/test_slurm.py (Debian's slurm-wlm + munge, ~20 s to install), then started.
#   bash .ci/slurm.sh      (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq slurm-wlm munge >/dev/null
bash tests/cluster/start-slurm.sh
