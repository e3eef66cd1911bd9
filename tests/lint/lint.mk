# Static checks that need no reviewer.
#   make lint           cppcheck (tests/lint/cppcheck.sh; also in TESTS, so in make test)

TESTS += tests/lint/cppcheck.sh

.PHONY: lint
lint:
	@tests/lint/cppcheck.sh
