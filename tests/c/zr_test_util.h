/*
 * zr_test_util.h - helpers shared by the cmocka suites in tests/c (test
 * only: compiled into each suite, never installed). Include it after
 * <cmocka.h>. Helpers that "fail" do so through cmocka (fail_msg / assert_*),
 * so they may only be called from inside a running test.
 */
#ifndef ZR_TEST_UTIL_H
#define ZR_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* -------------------------------------------------------- temp dirs */

/* Make a fresh directory "<base>/<prefix>-XXXXXX", where base is
 * $ZR_TEST_TMPDIR (or /tmp when unset or empty; created with its parents
 * if missing), and write its path into out[cap]. Returns 0, or -1 if the
 * path does not fit or the directory cannot be made. */
int zt_mkdtemp(char *out, size_t cap, const char *prefix);

/* Remove `dir` and everything under it (symlinks are not followed).
 * Returns 0, or nonzero if something could not be removed. */
int zt_rmtree(const char *dir);

/* One directory level (mode 0777 where modes exist). 0, or -1 with errno
 * set (EEXIST when it exists). */
int zt_os_mkdir(const char *path);

/* mkdtemp: replace the trailing "XXXXXX" of `templ` and create that
 * directory. 0, or -1. */
int zt_os_mkdtemp(char *templ);

/* Drop `path`'s pages from the OS page cache (write back, then
 * POSIX_FADV_DONTNEED), so a test can start cold. 0 when asked, -1 where
 * the OS has no such call (the pages may still stay: tmpfs keeps them). */
int zt_os_evict(const char *path);

/* 1 when the OS takes a huge-page hint for heap memory (Linux with
 * /sys/kernel/mm/transparent_hugepage/enabled not "[never]"), 0 when it
 * has none (macOS, Windows, THP off), -1 when that cannot be told. */
int zt_os_thp_madvise(void);

/* This process's id (as the platform names its temporary files). */
long zt_os_pid(void);

/* ------------------------------------------- per-test directories */

/* The fixture of a test that works in a fresh directory of its own, kept
 * in the cmocka state: dir is the directory, path a scratch buffer for
 * paths inside it (zt_dir_at; a suite may also keep one fixed path there). */
typedef struct zt_dir {
    char dir[512];
    char path[600];
} zt_dir;

/* cmocka setup: *state = a new zt_dir whose dir is made by zt_mkdtemp with
 * `prefix`. Returns 0, or -1 (nothing left behind). */
int zt_dir_setup(void **state, const char *prefix);

/* cmocka teardown for zt_dir_setup: removes dir and everything under it
 * (a tree that cannot be removed is left, the test does not fail) and
 * frees the fixture. Returns 0. */
int zt_dir_teardown(void **state);

/* "<dir>/<name>" in d->path (valid until the next call). */
const char *zt_dir_at(zt_dir *d, const char *name);

/* The same for the suites that keep the running test's directory at file
 * scope: zt_root_setup makes zt_root (zt_mkdtemp with `prefix`; 0 or -1),
 * zt_root_teardown removes it (0, or nonzero if something could not be
 * removed, as zt_rmtree), zt_root_at gives "<zt_root>/<name>" in a static
 * buffer (valid until the next call). */
extern char zt_root[512];
int zt_root_setup(const char *prefix);
int zt_root_teardown(void);
const char *zt_root_at(const char *name);

/* ------------------------------------------------------ whole files */

/* 1 if `path` exists (any kind of file), else 0. */
int zt_exists(const char *path);

/* Size of `path` in bytes, or -1 if it cannot be stat'ed. */
long zt_file_size(const char *path);

/* Create or replace `path` with the n bytes at buf (buf may be NULL when
 * n is 0). Fails the test on any error. */
void zt_write_file(const char *path, const void *buf, size_t n);

/* Read at most cap bytes from the start of `path` into buf; returns the
 * count read. Fails the test if the file cannot be opened. */
size_t zt_read_file(const char *path, void *buf, size_t cap);

/* Read all of `path` into a new malloc'd buffer *buf (one spare byte past
 * the end; the caller frees) and return its length. A file that cannot be
 * opened gives *buf == NULL and 0. */
size_t zt_slurp(const char *path, unsigned char **buf);

/* Overwrite n bytes at byte offset `off` of the existing file `path`.
 * Fails the test on any error. */
void zt_patch_file(const char *path, long off, const void *bytes, size_t n);

/* ------------------------------------------------- bytes and hashes */

void zt_put_le32(unsigned char *p, uint32_t v);
void zt_put_le64(unsigned char *p, uint64_t v);
uint32_t zt_get_le32(const unsigned char *p);

/* FNV-1a 32 of n bytes, the hash of docs/FORMAT.md (meta.zr checksum,
 * identity tag). */
uint32_t zt_fnv1a32(const unsigned char *p, size_t n);

/* ------------------------------------------------------- meta.zr */

/* The fields of a meta.zr header (docs/FORMAT.md), for tests that build or
 * alter headers by hand. */
typedef struct zt_meta {
    uint64_t length;
    uint32_t tail_chunk, tail_offset;
    unsigned char codec;
    uint32_t identity_tag;
    uint64_t seq;               /* copy sequence (64-byte copies only) */
    uint64_t synced_length;     /* synced state (64-byte copies only) */
    uint32_t synced_chunk, synced_offset;
} zt_meta;

/* One 64-byte header copy of meta.zr, sealed (magic, checksum). */
void zt_meta_copy(unsigned char out[64], const zt_meta *m);
/* The 32-byte meta.zr of older versions, sealed (checksum at 28). */
void zt_meta_legacy(unsigned char out[32], const zt_meta *m);
/* Give every whole header copy of `store`/meta.zr the identity tag `tag`
 * (resealed): a deliberate identity change, as opposed to damage. A
 * 32-byte header of an older version is changed the same way. */
void zt_meta_set_tag(const char *store, uint32_t tag);

/* --------------------------------------------------- little PRNGs */

/* xorshift64 (13, 7, 17): advances *s (must be nonzero) and returns it. */
uint64_t zt_xorshift64(uint64_t *s);

/* splitmix64: advances *s by the golden-ratio increment and returns the
 * mixed value (any seed, including 0). */
uint64_t zt_splitmix64(uint64_t *s);

/* ------------------------------------------------------------ misc */

/* The unsigned decimal value of environment variable `name`, or dflt when
 * it is unset or empty (a test knob such as ZR_FUZZ_ITERS). */
uint64_t zt_env_u64(const char *name, uint64_t dflt);

/* Fail the test unless the error detail string contains `needle`; the
 * failure is reported at the caller's file and line. */
#define zt_assert_mentions(detail, needle) \
    zt_assert_mentions_at((detail), (needle), __FILE__, __LINE__)
void zt_assert_mentions_at(const char *detail, const char *needle, const char *file, int line);

#endif /* ZR_TEST_UTIL_H */
