#!/usr/bin/env bash
# The man pages cannot drift from the program: every command `braid --help` lists has a
# braid-COMMAND.1, there is none for a command that is gone, each page is what help2man
# makes from the current binary (built page == regenerated page, date line aside), and
# every option the command's --help names is in its page.
set -u
. "$(dirname "$0")/lib.sh"
skip_sanitizer_build
command -v help2man >/dev/null || die "help2man is not installed (packaging/debian-packages.txt)"
man="$BUILD/man"
[ -s "$man/braid.1" ] || die "$man/braid.1 is missing (make man)"
cmds=$("$BUILD/braid" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p')
[ -n "$cmds" ] || die "braid --help lists no commands"
echo "commands: $(echo $cmds)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
packaging/man.sh "$BUILD/braid" "$tmp/man" || die "packaging/man.sh failed"
fails=0
for page in "$man"/*.1; do
	name=$(basename "$page" .1)
	case " braid $(echo $cmds | sed 's/\([^ ]*\)/braid-\1/g') " in
	*" $name "*) ;;
	*) echo "FAIL: $page is for no command braid --help lists"; fails=$((fails + 1)) ;;
	esac
done
for cmd in "" $cmds; do
	page="$man/braid${cmd:+-$cmd}.1"
	[ -s "$page" ] || { echo "FAIL: no man page for '${cmd:-braid}': $page"; fails=$((fails + 1)); continue; }
	if ! diff <(grep -v '^\.TH ' "$page") <(grep -v '^\.TH ' "$tmp/man/$(basename "$page")") >"$tmp/diff"; then
		echo "FAIL: $page differs from help2man's page of the current binary:"
		head -n 20 "$tmp/diff"
		fails=$((fails + 1))
	fi
	# help2man writes - as \- in roff; compare the options as text.
	text=$(sed 's/\\-/-/g' "$page")
	opts=$("$BUILD/braid" $cmd --help | grep -o -E -- '--[a-z][a-z0-9-]*' | sort -u)
	for o in $opts; do
		grep -q -F -- "$o" <<<"$text" || { echo "FAIL: $page lacks $o (in braid $cmd --help)"; fails=$((fails + 1)); }
	done
	echo "ok: $(basename "$page") ($(echo $opts | wc -w) options)"
done
[ "$fails" -eq 0 ] || die "$fails man page problem(s)"
echo "man pages: all match"
