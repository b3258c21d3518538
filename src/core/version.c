/*
 * version.c - the library's own version, for a program that wants to know
 * which soapflow it runs with rather than which headers it was compiled with
 * (a shared library can be newer than the program).
 */
#include "soapflow/version.h"

const char *sf_version(void) { return SOAPFLOW_VERSION_STRING; }
