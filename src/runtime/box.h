/*
 * box.h - copying a region of a tensor between two tiles' layouts, one
 * memcpy (or one loop of additions) per contiguous run (sf_tile_runs counts
 * them): the runtime's local copies, packing and unpacking (runtime.c), and
 * what calibrate times to price a run (calibrate.c).
 */
#ifndef SOAPFLOW_BOX_H
#define SOAPFLOW_BOX_H

#include "soapflow/graph.h"

/* Copy (add, when add) the elements of region r from src, laid out as tile a,
 * to dst, laid out as tile b (both row-major over their own extents, both
 * holding r). 4-byte elements: floats, or int32 labels copied as such. */
void sf_box_move(const void *src, const sf_tile *a, void *dst, const sf_tile *b, const sf_tile *r,
                 int add);

#endif
