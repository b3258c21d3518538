file(REMOVE_RECURSE
  "libsoapflow.a"
)
