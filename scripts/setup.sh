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

# build_aifs builds bin/aifs from the checkout.
build_aifs() {
	mkdir -p bin
	go build -o bin/aifs ./cmd/aifs
}
