#!/usr/bin/env bash
# Runs the whole aifs test suite on a fresh Debian 12 machine with Go, installing what it needs:
# formatting and vet, the Python tests (plan module, benchmark reports and arithmetic), a tiny run of
# the MLPerf-Storage-style benchmark (integration/bench/mlperf.sh, about 1.5 minutes), every
# package's tests with the race detector (integration tests build and drive the aifs binary; fuzz
# seed corpora run as ordinary tests), then the same tests once with GOMAXPROCS=1. CI runs exactly
# this (.ci/run). The tests are built with -tags integration, so that those needing root, FUSE, S3
# servers, tools or PyTorch run, and fail where what they need is missing (without the tag they
# skip: internal/testenv).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
need_packages ca-certificates git coreutils tar libarchive-tools zip attr sqlite3 xfsprogs e2fsprogs util-linux fuse3 systemd python3-pil python3-numpy python3-torch python3-torchvision python3-matplotlib python3-venv python3-pip python3-setuptools
need_versitygw
need_minio

# Lazily unmount what an interrupted earlier run left under the tests' temporary folders (aifs
# mounts under aifs-integration-* and Test*/, loop-mounted ext4/XFS/ramfs of the backend tests):
# a leftover mount breaks the next run.
tmp=${TMPDIR:-/tmp}
awk -v tmp="$tmp" '$2 ~ "^" tmp "/(aifs-integration-|Test)" { print $2 }' /proc/mounts | sort -r |
	while read -r m; do umount -l "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null || true; done
# and the memory cgroups of the page-cache tests (empty once their processes are gone)
rmdir /sys/fs/cgroup/aifs-test-* /sys/fs/cgroup/memory/aifs-test-* 2>/dev/null || true

unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
go vet ./...
go vet -tags integration ./...
go vet -tags aifs_noio ./backend/local ./cmd/aifs # the benchmark's no-I/O build (compare.sh) must still build
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m unittest discover -s python
# The package as users install it: a clean virtual environment over Debian's torch, no network;
# the package's tests run from a copy, so that they import the installed aifs, not python/.
pyenv=$(mktemp -d /tmp/aifs-pyenv.XXXXXX)
trap 'rm -rf "$pyenv"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$pyenv/venv"
"$pyenv/venv/bin/python" -m pip install -q --no-build-isolation --no-index ./python
rm -rf python/build python/aifs.egg-info
mkdir "$pyenv/tests" && cp python/test_aifs_plan.py python/test_aifs_direct.py python/test_package.py python/test_resume.py "$pyenv/tests/"
(cd "$pyenv/tests" && AIFS_INSTALLED=1 AIFS_SOURCE="$OLDPWD" PYTHONDONTWRITEBYTECODE=1 "$pyenv/venv/bin/python" -m unittest discover -s .)
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m unittest discover -s integration/bench # the benchmark reports
# The MLPerf-Storage-style benchmark end to end, tiny (two workloads of a few hundred files, N = 1-2,
# ext4 and aifs with aifs_plan's sampler), so that it cannot rot: it fails if a run fails or a row
# is missing from its report.
PYTHONDONTWRITEBYTECODE=1 SMOKE=1 integration/bench/mlperf.sh
# The formats benchmark (integration/bench/formats.sh) end to end, tiny (2 files of 500 samples a
# format, 300 JPEGs, one pass): it fails if a step fails or a format's rows are missing.
SMOKE=1 integration/bench/formats.sh
go test -tags integration -race -count=1 -timeout 20m ./...
GOMAXPROCS=1 go test -tags integration -count=1 -timeout 20m ./...
echo "all tests passed"
