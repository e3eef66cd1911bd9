// SPDX-License-Identifier: Apache-2.0
/* BRAID_FSROOT: host files read under a root directory (plugin/fsroot.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/fsroot.h"
#include "plugin/params.h"
#include "tests/unit/unit.h"

static void use_root(const char *root)
{
	if (root)
		setenv("BRAID_FSROOT", root, 1);
	else
		unsetenv("BRAID_FSROOT");
	braid_params_reset();
}

static void real_root_by_default(void **state)
{
	char buf[64];

	(void)state;
	use_root(NULL);
	assert_string_equal(braid_fsroot(), "");
	assert_int_equal(braid_fsroot_path(buf, sizeof(buf), "/sys/module/x"), 0);
	assert_string_equal(buf, "/sys/module/x");
	assert_true(braid_fsroot_exists("/proc/self"));
	use_root("/");
	assert_int_equal(braid_fsroot_path(buf, sizeof(buf), "/sys/module/x"), 0);
	assert_string_equal(buf, "/sys/module/x");
}

static void paths_under_a_root(void **state)
{
	char dir[] = "/tmp/braid-fsroot.XXXXXX", path[256], buf[256];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sys", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/sys/version", dir);
	fclose(fopen(path, "w"));

	snprintf(buf, sizeof(buf), "%s//", dir); /* trailing slashes do not double */
	use_root(buf);
	assert_int_equal(braid_fsroot_path(buf, sizeof(buf), "/sys/version"), 0);
	assert_string_equal(buf, path);
	assert_true(braid_fsroot_exists("/sys/version"));
	assert_false(braid_fsroot_exists("/sys/nothing"));
	assert_false(braid_fsroot_exists("/proc/self")); /* not the real root any more */
	/* Too long for the buffer: refused, empty. */
	assert_int_equal(braid_fsroot_path(buf, 8, "/sys/version"), -1);
	assert_string_equal(buf, "");

	unlink(path);
	snprintf(path, sizeof(path), "%s/sys", dir);
	rmdir(path);
	rmdir(dir);
	use_root(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(real_root_by_default),
		cmocka_unit_test(paths_under_a_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
