# Mutants of include/nccl_net_abi.h for test-abi-mutation.sh:
#   awk -v outdir=DIR -f abi-mutate.awk FACTS EXPANDED_HEADER > MANIFEST
# FACTS is tests/unit/nccl-net-abi-v8-v12.txt; EXPANDED_HEADER is our header with its macros
# expanded, so that each struct has its own members (the shared member lists are macros).
# For each typedef'd struct that a v8..v12 struct of FACTS names (directly or through
# typedef aliases: ncclNetProperties_v10_t is v9's, ncclNetVDeviceProps_v9..11_t are one),
# and for each of its members, three mutants, each written to DIR/ID.h:
#   pad     char braid_mut_pad[8]; inserted before the member (moves it: the largest
#           alignment here is 8, so its offset grows whatever came before)
#   width   the member's type changed: 4 bytes -> int64_t, 8 -> int32_t, else char[size + 1]
#   rename  the member renamed (a member of FACTS without counterpart in the header)
# One manifest line per mutant: ID KIND STRUCT MEMBER NAMES, NAMES being the fact-file
# names of that struct joined with '|'. Exits 1 (message on stderr) when a fact struct or
# member has no counterpart, or a member of a mutated struct is not in FACTS.

function fail(msg) {
	print "abi-mutate: " msg > "/dev/stderr"
	failed = 1
	exit 1
}

function trim(s) {
	sub(/^[ \t\n]+/, "", s)
	sub(/[ \t\n]+$/, "", s)
	return s
}

# The name a member declaration declares: (*name)(...) for a function pointer, else the
# last identifier before any [N].
function decl_name(d, s) {
	if (match(d, /\([ \t\n]*\*[ \t\n]*[A-Za-z_][A-Za-z0-9_]*[ \t\n]*\)/)) {
		s = substr(d, RSTART, RLENGTH)
		gsub(/[()* \t\n]/, "", s)
		return s
	}
	s = trim(d)
	sub(/([ \t\n]*\[[^]]*\])+$/, "", s)
	if (!match(s, /[A-Za-z_][A-Za-z0-9_]*$/))
		fail("cannot find the member name in: " d)
	return substr(s, RSTART, RLENGTH)
}

function resolve(t, n) {
	for (n = 0; !(t in body) && (t in alias) && n < 16; n++)
		t = alias[t]
	return (t in body) ? t : ""
}

# FACTS (first file): struct and member lines of v8..v12.
FNR == NR {
	if (/^#/ || /^[ \t]*$/)
		next
	if ($2 == "sizeof") {
		type = $1
		version = type
		sub(/^.*_v/, "", version)
		sub(/_t$/, "", version)
		keep = version + 0 <= 12
		if (keep)
			fact_types[++nfact_types] = type
		next
	}
	if (keep) {
		fact_members[type] = fact_members[type] " " $1
		fact_size[type, $1] = $5
	}
	next
}

# EXPANDED_HEADER (second file): read whole.
{
	src = src $0 "\n"
}

END {
	if (failed)
		exit 1
	# typedef struct { ... } NAME;  and  typedef OLD NEW;
	rest = src
	pos = 0
	while (match(rest, /typedef struct[ \t\n]*\{/)) {
		bstart = pos + RSTART + RLENGTH # first char of the body, in src
		rest = substr(rest, RSTART + RLENGTH)
		pos = bstart - 1
		close_at = index(rest, "}")
		if (index(substr(rest, 1, close_at - 1), "{"))
			fail("nested braces in a struct: not handled")
		tail = substr(rest, close_at + 1)
		if (!match(tail, /^[ \t\n]*[A-Za-z_][A-Za-z0-9_]*[ \t\n]*;/))
			continue
		name = trim(substr(tail, 1, RLENGTH - 1))
		body[name] = substr(rest, 1, close_at - 1)
		body_at[name] = bstart
	}
	n = split(src, lines, "\n")
	id_re = "[A-Za-z_][A-Za-z0-9_]*"
	for (i = 1; i <= n; i++)
		if (lines[i] ~ "^typedef[ \t]+" id_re "[ \t]+" id_re "[ \t]*;[ \t]*$") {
			split(lines[i], w, /[ \t;]+/)
			alias[w[3]] = w[2]
		}

	# Each fact struct to its definition; every fact member must be one of its members.
	for (i = 1; i <= nfact_types; i++) {
		t = fact_types[i]
		d = resolve(t)
		if (d == "")
			fail(t " (fact file) has no typedef'd struct in the header")
		if (d in names)
			names[d] = names[d] "|" t
		else
			names[d] = t
		nm = split(fact_members[t], fm, " ")
		for (j = 1; j <= nm; j++)
			member_fact_type[d, fm[j]] = t
	}

	id = 0
	for (i = 1; i <= nfact_types; i++) {
		d = resolve(fact_types[i])
		if (d in done)
			continue
		done[d] = 1
		nd = split(body[d], decls, ";")
		for (k = 1; k <= nd; k++) {
			if (trim(decls[k]) == "")
				continue
			m = decl_name(decls[k])
			if (!((d, m) in member_fact_type))
				fail(d "." m " is in the header but not in the fact file")
			size = fact_size[member_fact_type[d, m], m] + 0
			covered[d, m] = 1
			for (kind = 1; kind <= 3; kind++) {
				mutant = decls[k]
				if (kind == 1) {
					what = "pad"
					mutant = " char braid_mut_pad[8];" mutant
				} else if (kind == 2) {
					what = "width"
					if (size == 4)
						mutant = " int64_t " m
					else if (size == 8)
						mutant = " int32_t " m
					else
						mutant = " char " m "[" (size + 1) "]"
				} else {
					what = "rename"
					if (!match(mutant, "\\*[ \t\n]*" m "[ \t\n]*\\)") &&
					    !match(mutant, m "([ \t\n]*\\[[^]]*\\])*[ \t\n]*$"))
						fail("could not rename " d "." m)
					at = index(substr(mutant, RSTART), m) + RSTART - 1
					mutant = substr(mutant, 1, at - 1) m "_renamed" \
						 substr(mutant, at + length(m))
				}
				text = ""
				for (j = 1; j <= nd; j++)
					text = text (j > 1 ? ";" : "") (j == k ? mutant : decls[j])
				file = sprintf("%s/%03d.h", outdir, ++id)
				printf "%s%s%s", substr(src, 1, body_at[d] - 1), text,
				       substr(src, body_at[d] + length(body[d])) > file
				close(file)
				printf "%03d %s %s %s %s\n", id, what, d, m, names[d]
			}
		}
	}
	# Every member line of the fact file mutated through its struct's definition.
	for (i = 1; i <= nfact_types; i++) {
		t = fact_types[i]
		nm = split(fact_members[t], fm, " ")
		for (j = 1; j <= nm; j++)
			if (!((resolve(t), fm[j]) in covered))
				fail(t "." fm[j] " (fact file) has no member in the header")
	}
}
