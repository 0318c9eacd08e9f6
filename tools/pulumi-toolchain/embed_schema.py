"""python3 embed_schema.py SRC DEST VERSION: a provider's schema.json (SRC) compacted into DEST with
"version" set to VERSION (left as it is when VERSION is empty): what the providers' own
`go generate` step writes to schema-embed.json (tools/pulumi-toolchain/pulumi-toolchain.sh)."""

import json
import sys

src, dest, version = sys.argv[1:]
with open(src, encoding="utf-8") as f:
    spec = json.load(f)
if version:
    spec["version"] = version
with open(dest, "w", encoding="utf-8") as f:
    json.dump(spec, f, separators=(",", ":"))
