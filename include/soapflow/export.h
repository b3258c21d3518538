/*
 * soapflow/export.h - SF_API, the mark of the library's public functions.
 *
 * The libraries are compiled with -fvisibility=hidden, so a function is part
 * of a shared soapflow library's interface only when its declaration in
 * include/soapflow/ carries SF_API; the modules' internal functions (the
 * src/.../_impl.h headers) stay out of it. In a static library visibility
 * changes nothing at link time: the CLI and the tests, which link the static
 * libraries, still reach the internal functions.
 */
#ifndef SOAPFLOW_EXPORT_H
#define SOAPFLOW_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define SF_API __attribute__((visibility("default")))
#else
#define SF_API
#endif

#endif
