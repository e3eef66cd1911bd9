# Static checks that need no reviewer.
#   make lint           cppcheck (tests/lint/cppcheck.sh), no circle of calls between files
#                       (call-circles.py), no plugin or tool source over 700 lines
#                       (file-size.sh); all three also in TESTS, so in make test
#   make format         clang-format -i (.clang-format) on every tracked .c and .h file,
#                       or on FILES="a.c b.h" only
#   make format-check   what clang-format would change, failing if anything would (in
#                       make test too: tests/lint/format-check.sh)

LINT_FORMAT_FILES = $(or $(FILES),$(shell git ls-files '*.c' '*.h' 2>/dev/null))
CLANG_FORMAT ?= clang-format

TESTS += tests/lint/cppcheck.sh tests/lint/format-check.sh tests/lint/call-circles.py \
	tests/lint/file-size.sh

.PHONY: lint format format-check
lint:
	@tests/lint/cppcheck.sh
	@tests/lint/call-circles.py
	@tests/lint/file-size.sh

format:
	@command -v $(CLANG_FORMAT) >/dev/null || \
		{ echo "no $(CLANG_FORMAT): apt-get install clang-format"; exit 1; }
	$(CLANG_FORMAT) -i --style=file $(LINT_FORMAT_FILES)

format-check:
	@CLANG_FORMAT=$(CLANG_FORMAT) tests/lint/format-check.sh $(LINT_FORMAT_FILES)
