/* libarchive, loaded when scan first meets an archive (dlopen, as systemd loads its optional
 * libraries): every other command, and a scan of a tree without archives, starts without mapping
 * it and the nine libraries it brings (about 1.7 ms and 170 page faults a run on the machines we
 * measure). Its functions are called through the table, typed by libarchive's own headers. */
#ifndef TC_SCAN_LIBARCHIVE_H
#define TC_SCAN_LIBARCHIVE_H

#include <archive.h>
#include <archive_entry.h>

#include "dl.h"

#define SCAN_LA_FNS(X)                                                                                   \
    X(archive_read_new) X(archive_read_free) X(archive_read_open1) X(archive_read_next_header)           \
    X(archive_read_data) X(archive_error_string) X(archive_set_error) X(archive_format)                  \
    X(archive_filter_code) X(archive_filter_count) X(archive_filter_bytes)                               \
    X(archive_read_set_read_callback) X(archive_read_set_skip_callback)                                  \
    X(archive_read_set_seek_callback) X(archive_read_set_close_callback)                                 \
    X(archive_read_set_callback_data) X(archive_read_support_format_raw)                                 \
    X(archive_read_support_format_7zip) X(archive_read_support_format_ar)                                \
    X(archive_read_support_format_cpio) X(archive_read_support_format_iso9660)                           \
    X(archive_read_support_format_rar) X(archive_read_support_format_rar5)                               \
    X(archive_read_support_format_tar) X(archive_read_support_format_zip_seekable)                       \
    X(archive_read_support_filter_gzip) X(archive_read_support_filter_bzip2)                             \
    X(archive_read_support_filter_xz) X(archive_read_support_filter_lzma)                                \
    X(archive_read_support_filter_lzip) X(archive_read_support_filter_zstd)                              \
    X(archive_read_support_filter_lz4) X(archive_read_support_filter_compress)                           \
    X(archive_entry_filetype) X(archive_entry_hardlink) X(archive_entry_is_encrypted)                    \
    X(archive_entry_pathname) X(archive_entry_pathname_utf8) X(archive_entry_size)                       \
    X(archive_entry_size_is_set) X(archive_entry_sparse_count)

typedef struct scan_la {
    SCAN_LA_FNS(TC_DL_FIELD)
} scan_la;

/* The table, loaded on the first call (any thread); NULL when libarchive cannot be loaded, and
 * *why then says why in one line (a static string). */
const scan_la *scan_la_load(const char **why);

#endif
