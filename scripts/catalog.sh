# Sourced by scripts/setup and scripts/package: the built-in models' pins, read from the one
# list of them, crates/kasten-llm/src/catalog.rs (its names, directories, files and sha256s
# are literals so that this can read them).
catalog="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/crates/kasten-llm/src/catalog.rs"

# The name of the default model (DEFAULT_MODEL).
catalog_default_model() {
  sed -n 's/^pub const DEFAULT_MODEL: &str = "\([^"]*\)";$/\1/p' "$catalog"
}

# The catalog entry of model $1, from its name to the end of its parts (empty if none).
catalog_block() {
  awk -v n="name: \"$1\"" 'index($0, n) {on = 1} on {print} on && /^ *\],/ {exit}' "$catalog"
}

# Field $1 (dir, file, sha256, …) of the entry $2 (catalog_block's output).
catalog_field() { sed -n "s/^ *$1: \"\([^\"]*\)\".into(),\$/\1/p" <<<"$2" | head -1; }
