#!/usr/bin/env bash
# Install the Debian packages listed in debian-packages.txt that are missing.
# Idempotent and quiet when everything is present, so `make test` can always call it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
missing=()
while read -r pkg; do
	case "$pkg" in ''|'#'*) continue ;; esac
	if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$pkg")
	fi
done <"$here/debian-packages.txt"
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing missing Debian packages: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
