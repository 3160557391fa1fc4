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

# need_versitygw installs the S3 server the tests and benchmarks run on 127.0.0.1 (versitygw,
# posix backend) into $(go env GOPATH)/bin, unless that version is there already, and exports
# AIFS_VERSITYGW with its path (backend/s3/s3test finds it there).
VERSITYGW_VERSION=v1.8.0
need_versitygw() {
	local bin
	bin="$(go env GOPATH)/bin/versitygw"
	if ! { [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -q "^[[:space:]]*mod[[:space:]]*github.com/versity/versitygw[[:space:]]*$VERSITYGW_VERSION"; }; then
		echo "installing versitygw $VERSITYGW_VERSION" >&2
		go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
	fi
	export AIFS_VERSITYGW="$bin"
}

# build_aifs builds bin/aifs from the checkout.
build_aifs() {
	mkdir -p bin
	go build -o bin/aifs ./cmd/aifs
}
