#include <stdio.h>
#include "soapflow/graph.h"
int main(void) { printf("soapflow\n"); return 0; }
