#!/usr/bin/env python3
"""Chaincode-as-a-service external builder for the Fabric peer (docs/fabric.md "Topology").

Invoked by the peer as bin/detect, bin/build and bin/release (symlinks to this file):
  detect  SRC META          exit 0 iff META/metadata.json has type "ccaas" (case-insensitive)
  build   SRC META OUT      render SRC/connection.json's string fields as templates ({{.key}})
                            with $CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG (JSON) -> OUT/connection.json;
                            copy metadata.json and META-INF
  release OUT RELEASE       OUT/connection.json -> RELEASE/chaincode/server/connection.json
                            (its presence makes the peer dial the chaincode instead of running it);
                            OUT/META-INF/statedb -> RELEASE/statedb
Same behaviour as Fabric's ccaas_builder/cmd/{detect,build,release}; only standard library.
"""

import json
import os
import re
import shutil
import sys

_TEMPLATE = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")


def detect(src, meta):
    with open(os.path.join(meta, "metadata.json")) as f:
        return 0 if str(json.load(f).get("type", "")).lower() == "ccaas" else 1


def render(value, ctx):
    def sub(m):
        if m.group(1) not in ctx:
            raise KeyError(
                f"connection.json template uses {m.group(0)} but "
                f"CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG has no '{m.group(1)}'"
            )
        return str(ctx[m.group(1)])

    return _TEMPLATE.sub(sub, value)


def build(src, meta, out):
    conn_file = os.path.join(src, "connection.json")
    if not os.path.isfile(conn_file):
        print(f"ccaas build: {conn_file} missing", file=sys.stderr)
        return 1
    ctx = json.loads(os.environ.get("CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG") or "{}")
    with open(conn_file) as f:
        conn = json.load(f)
    conn = {k: render(v, ctx) if isinstance(v, str) else v for k, v in conn.items()}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "connection.json"), "w") as f:
        json.dump(conn, f)
    shutil.copy(os.path.join(meta, "metadata.json"), os.path.join(out, "metadata.json"))
    if os.path.isdir(os.path.join(src, "META-INF")):
        shutil.copytree(os.path.join(src, "META-INF"), os.path.join(out, "META-INF"), dirs_exist_ok=True)
    return 0


def release(out, rel):
    server = os.path.join(rel, "chaincode", "server")
    os.makedirs(server, exist_ok=True)
    shutil.copy(os.path.join(out, "connection.json"), os.path.join(server, "connection.json"))
    statedb = os.path.join(out, "META-INF", "statedb")
    if os.path.isdir(statedb):
        shutil.copytree(statedb, os.path.join(rel, "statedb"), dirs_exist_ok=True)
    return 0


def main(argv):
    verb = os.path.basename(argv[0])
    need = {"detect": 2, "build": 3, "release": 2}
    if verb not in need or len(argv) - 1 < need[verb]:
        print(
            f"usage: detect SRC META | build SRC META OUT | release OUT RELEASE (called as {verb})",
            file=sys.stderr,
        )
        return 2
    return {"detect": detect, "build": build, "release": release}[verb](*argv[1 : 1 + need[verb]])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
