# Turn tests/unit/nccl-net-abi-v8-v12.txt (NCCL's struct layouts) into test_abi's checks:
#   awk -f tests/unit/gen-abi-facts.awk tests/unit/nccl-net-abi-v8-v12.txt > abi_facts.c
# writes a C file whose table abi_facts[] (tests/unit/abi_check.h) has one entry per line
# of the fact file, at that line's number (a #line directive maps them back), so that a
# failed check or a compile error names the line of the fact file:
#   TYPE sizeof N                    ->  ABI_SIZEOF(TYPE, N)
#     member offset O size S         ->  ABI_MEMBER(TYPE, member, O, S)
# braid defines v8..v12: lines of structs of a later version are counted and left out.
# A member of the file missing from include/nccl_net_abi.h is a compile error at its line.
# Any line of another shape stops the generator, so that no line goes unchecked by accident.

function fail(msg) {
	printf "%s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"
	failed = 1
	exit 1
}

BEGIN {
	max_version = 12
	out = ""
	if (out_name == "")
		out_name = "abi_facts.c" # -v out_name=PATH: where the output goes, for #line
}

/^#/ || /^[ \t]*$/ {
	out = out "\n"
	next
}

/^[A-Za-z_][A-Za-z0-9_]*[ \t]+sizeof[ \t]+[0-9]+[ \t]*$/ {
	type = $1
	if (!match(type, /_v[0-9]+_t$/))
		fail("no _v<N>_t version suffix in struct name " type)
	version = substr(type, RSTART + 2, RLENGTH - 4) + 0
	if (version < 8)
		fail(type ": braid implements v8 and later only")
	skip = version > max_version
	if (skip) {
		skipped++
		if (!(version in seen_skip)) {
			seen_skip[version] = 1
			sep = skipped_versions == "" ? "" : ","
			skipped_versions = skipped_versions sep "v" version
		}
		out = out "\n"
	} else {
		structs++
		out = out sprintf("ABI_SIZEOF(%s, %d)\n", type, $3)
	}
	next
}

/^[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]+offset[ \t]+[0-9]+[ \t]+size[ \t]+[0-9]+[ \t]*$/ {
	if (type == "")
		fail("member line before any struct line")
	if (skip) {
		skipped++
		out = out "\n"
	} else {
		members++
		out = out sprintf("ABI_MEMBER(%s, %s, %d, %d)\n", type, $1, $3, $5)
	}
	next
}

{
	fail("not a struct line (TYPE sizeof N), a member line (  NAME offset O size S), a comment")
}

END {
	if (failed)
		exit 1
	if (structs == 0)
		fail("no v8..v12 struct in the file")
	# 12 lines up to "#line 1", FNR lines of facts, a "#line" back: "};" is line 12 + FNR + 2
	printf "/* Generated from %s by tests/unit/gen-abi-facts.awk: do not edit. */\n", FILENAME
	printf "#include <stddef.h>\n\n"
	printf "#include \"nccl_net_abi.h\"\n"
	printf "#include \"tests/unit/abi_check.h\"\n\n"
	printf "const char abi_facts_file[] = \"%s\";\n", FILENAME
	printf "const int abi_facts_skipped = %d;\n", skipped
	printf "const char abi_facts_skipped_versions[] = \"%s\";\n", \
		skipped_versions == "" ? "none" : skipped_versions
	printf "\n"
	printf "const struct abi_fact abi_facts[] = {\n"
	printf "#line 1 \"%s\"\n", FILENAME
	printf "%s", out
	printf "#line %d \"%s\"\n", 12 + FNR + 2, out_name
	printf "};\n"
	printf "const size_t abi_nfacts = sizeof(abi_facts) / sizeof(abi_facts[0]);\n"
}
