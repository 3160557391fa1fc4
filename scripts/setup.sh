# Sourced by the other scripts: checks for Go, installs missing Debian packages, builds aifs.
# Usage: . scripts/setup.sh; need_packages PKG...; build_aifs
set -euo pipefail

export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
if ! command -v go >/dev/null; then
	echo "aifs: Go is not installed (https://go.dev/doc/install); it is the one prerequisite" >&2
	exit 1
fi

# need_packages installs the Debian packages it is given that are not installed yet.
need_packages() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	echo "installing ${missing[*]}" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# need_go_binary VAR NAME MODULE PACKAGE VERSION installs PACKAGE@VERSION into
# $(go env GOPATH)/bin unless NAME there was built from MODULE at VERSION already, and exports
# VAR with the binary's path.
need_go_binary() {
	local bin
	bin="$(go env GOPATH)/bin/$2"
	if ! { [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -qE "^[[:space:]]*mod[[:space:]]+$3[[:space:]]+$5([[:space:]]|$)"; }; then
		echo "installing $2 $5" >&2
		go install "$4@$5"
	fi
	export "$1=$bin"
}

# need_versitygw installs the S3 server the tests and benchmarks run on 127.0.0.1 (versitygw,
# posix backend) and exports AIFS_VERSITYGW with its path (backend/s3/s3test finds it there).
VERSITYGW_VERSION=v1.8.0
need_versitygw() {
	need_go_binary AIFS_VERSITYGW versitygw github.com/versity/versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION"
}

# need_minio installs MinIO, the S3 server that backend/s3/s3test runs erasure-coding over four
# drives (s3test.StartMinIO), and exports AIFS_MINIO with its path. MinIO tags no semver
# releases: the version is the pseudo-version of a commit, the same as s3test.MinIOVersion.
# Building it takes about 4 minutes on a fresh machine with 2 cores.
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
need_minio() {
	need_go_binary AIFS_MINIO minio github.com/minio/minio github.com/minio/minio "$MINIO_VERSION"
}

# build_aifs builds bin/aifs from the checkout.
build_aifs() {
	mkdir -p bin
	go build -o bin/aifs ./cmd/aifs
}
