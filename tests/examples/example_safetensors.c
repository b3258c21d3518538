/* example_safetensors.c - the example that opens include/soapflow/safetensors.h,
 * built and run as a test (see example_core.c) in a temporary folder: what it
 * writes it reads back, tensor for tensor and the metadata. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "soapflow/safetensors.h"

static int example(const float *w, const float *b) {
#include "safetensors_example.inc"
    (void)step;
    return !f || !wt;
}

int main(void) {
    char dir[] = "/tmp/sf_example_st_XXXXXX";
    if (!mkdtemp(dir) || chdir(dir)) return 1;
    float w[840], b[10];
    for (int i = 0; i < 840; i++) w[i] = (float)i * 0.5f;
    for (int i = 0; i < 10; i++) b[i] = (float)-i;
    int rc = example(w, b);
    sf_error err = {0};
    sf_st_file *f = sf_safetensors_read("ckpt.safetensors", &err);
    const sf_st_tensor *t = f ? sf_safetensors_find(f, "fc3.weight") : NULL;
    const char *step = f ? sf_safetensors_meta(f, "step") : NULL;
    if (!t || t->numel != 840 || memcmp(t->data, w, sizeof w) || !step || strcmp(step, "1200")) {
        fprintf(stderr, "example_safetensors: read back differs (%s)\n", err.msg);
        rc = 1;
    }
    sf_safetensors_free(f);
    remove("ckpt.safetensors");
    if (chdir("/") == 0) rmdir(dir);
    return rc;
}
