#!/usr/bin/env python3
"""Writes the protobuf schema tables that `selfhost recover` decodes etcd values with, and
that the simulator's etcd encodes them with.

Kubernetes stores objects in etcd as protobuf (`k8s\\0`, then a runtime.Unknown holding the
message). The field numbers come from the k8s-pb crate (prost code generated from upstream's
generated.proto files); the JSON names from k8s-openapi (generated from upstream's OpenAPI
spec). Both crates are read from cargo's registry, where `cargo fetch` puts them:

    cargo fetch && python3 crates/selfhost-core/scripts/protobuf-schema.py

Only the messages that a DaemonSet, a Secret and a ConfigMap reach are written. The
apimachinery types whose JSON differs from their message (Time, MicroTime, Duration,
IntOrString, Quantity, FieldsV1, RawExtension) are kinds of their own, and the three fields
Go embeds inline in JSON (Volume's source, Probe's handler, EphemeralContainer's common part)
are marked so.
"""

import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
REGISTRY = os.path.expanduser("~/.cargo/registry/src")
PB_VERSION = "0.9.0"
OPENAPI_VERSION = "0.29.0"
ROOTS = ["api.apps.v1.DaemonSet", "api.core.v1.Secret", "api.core.v1.ConfigMap"]
SPECIAL = {
    "apimachinery.pkg.apis.meta.v1.Time": "Time",
    "apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime",
    "apimachinery.pkg.apis.meta.v1.Duration": "Duration",
    "apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
    "apimachinery.pkg.api.resource.Quantity": "Quantity",
    "apimachinery.pkg.apis.meta.v1.FieldsV1": "FieldsV1",
    "apimachinery.pkg.runtime.RawExtension": "Raw",
}
# Fields that Go embeds: Probe's handler, whose name another kind uses for a field of its
# own, and those found by their missing JSON name (a field named for the type it holds).
INLINE = {("api.core.v1.Probe", "handler")}
SCALARS = {"string": "Str", "bytes": "Bytes", "bool": "Bool", "int32": "I32", "int64": "I64",
           "double": "F64"}
OUTPUTS = [
    ("crates/selfhost-core/src/etcd/schema.rs", "super::message"),
    ("crates/selfhost-sim/src/etcd/schema.rs", "super::message"),
]


def crate_dir(name, version):
    found = glob.glob(os.path.join(REGISTRY, "*", f"{name}-{version}"))
    if not found:
        sys.exit(f"{name} {version} is not in {REGISTRY}: run `cargo fetch` first")
    return found[0]


def module_of(path, src):
    rel = os.path.relpath(os.path.dirname(path), src)
    return rel.replace(os.sep, ".")


FIELD = re.compile(r'#\[prost\((?P<attr>[^\]]*)\)\]\s*pub (?P<name>r#\w+|\w+):\s*')


def rust_type(text, start):
    """The type that starts at `start`, up to the comma that ends the field."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "," and depth == 0:
            return text[start:i]
    return text[start:]
STRUCT = re.compile(r'pub struct (\w+) \{(.*?)\n\}', re.S)


def resolve(ty, module):
    """The message a Rust type path names, as `module.Name`."""
    ty = re.sub(r"::core::option::Option<|::prost::alloc::vec::Vec<|>$", "", ty.strip())
    ty = ty.strip().rstrip(">").strip()
    parts = ty.split("::")
    mod = module.split(".")
    while parts and parts[0] == "super":
        parts.pop(0)
        mod.pop()
    return ".".join(mod + parts)


def parse_pb(src):
    messages = {}
    for path in glob.glob(os.path.join(src, "**", "mod.rs"), recursive=True):
        module = module_of(path, src)
        text = open(path).read()
        for struct in STRUCT.finditer(text):
            name, body = struct.group(1), struct.group(2)
            fields = []
            for f in FIELD.finditer(body):
                attr, fname = f.group("attr"), f.group("name")
                ty = rust_type(body, f.end())
                fname = fname.removeprefix("r#")
                tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
                repeated = "repeated" in attr
                kind = attr.split(",")[0].strip()
                if kind.startswith("btree_map"):
                    value = re.search(r'btree_map = "string, (\w+)"', attr).group(1)
                    if value == "message":
                        inner = re.search(r"String,\s*(.*?),?\s*>\s*$", " ".join(ty.split())).group(1)
                        fields.append((tag, fname, "map", resolve(inner, module), False))
                    else:
                        fields.append((tag, fname, "map", value, False))
                elif kind == "message":
                    fields.append((tag, fname, "message", resolve(ty, module), repeated))
                else:
                    kind = kind.split("=")[0].strip()
                    fields.append((tag, fname, kind, None, repeated))
            messages[f"{module}.{name}"] = fields
    return messages


def json_names(openapi):
    names = {}
    pattern = re.compile(r'"([A-Za-z0-9$_]+)" => Field::Key_(\w+),')
    for path in glob.glob(os.path.join(openapi, "src", "v1_37", "**", "*.rs"), recursive=True):
        for json, snake in pattern.findall(open(path).read()):
            names.setdefault(snake, set()).add(json)
            names.setdefault(json.lower(), set()).add(json)
    return names


def closure(messages):
    seen, todo = [], list(ROOTS)
    while todo:
        name = todo.pop()
        if name in seen or name in SPECIAL:
            continue
        seen.append(name)
        for _tag, _f, kind, target, _r in messages[name]:
            if kind in ("message", "map") and target in messages:
                todo.append(target)
    return sorted(seen)


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def kind_of(owner, fname, kind, target):
    if kind == "message":
        if (owner, fname) in INLINE:
            return f'Inline("{target}")'
        if target in SPECIAL:
            return SPECIAL[target]
        return f'Msg("{target}")'
    if kind == "map":
        if target in SCALARS:
            return f"Map(&{SCALARS[target]})"
        if target in SPECIAL:
            return f"Map(&{SPECIAL[target]})"
        return f'Map(&Msg("{target}"))'
    return SCALARS[kind]


def main():
    pb = os.path.join(crate_dir("k8s-pb", PB_VERSION), "src")
    names = json_names(crate_dir("k8s-openapi", OPENAPI_VERSION))
    messages = parse_pb(pb)
    wanted = closure(messages)
    lines = []
    for name in wanted:
        entries = []
        for tag, fname, kind, target, repeated in sorted(messages[name]):
            options = names.get(fname, set())
            if not options:
                # prost and k8s-openapi split some acronyms apart differently (targetWWNs).
                options = set(names.get(fname.replace("_", "").lower(), set()))
            embedded = kind == "message" and snake(target.rsplit(".", 1)[1]).endswith(fname)
            if (name, fname) in INLINE or (embedded and not options):
                # Go embeds the struct: its fields are the owner's in JSON.
                INLINE.add((name, fname))
                json = camel(fname)
            elif not options:
                # A field newer than k8s-openapi's types, which ignore it anyway.
                json = camel(fname)
            elif len(options) == 1:
                json = next(iter(options))
            else:
                guess = camel(fname)
                matches = [o for o in options if o == guess] or [
                    o for o in options if o.lower() == guess.lower()
                ]
                if len(matches) != 1:
                    sys.exit(f"no single JSON name for {name}.{fname}: {sorted(options)}")
                json = matches[0]
            k = kind_of(name, fname, kind, target)
            ctor = "many" if repeated else "one"
            entries.append(f'{ctor}({tag}, "{json}", {k})')
        lines.append(f'    msg("{name}", &[{", ".join(entries)}]),')
    for out, wire in OUTPUTS:
        path = os.path.join(REPO, out)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(
                "//! The protobuf messages a DaemonSet, a Secret and a ConfigMap are stored in: field\n"
                f"//! numbers from k8s-pb {PB_VERSION}, JSON names from k8s-openapi {OPENAPI_VERSION}.\n"
                "//! Written by `crates/selfhost-core/scripts/protobuf-schema.py`; do not edit.\n\n"
                f"use {wire}::Kind::*;\n"
                f"use {wire}::{{Message, many, msg, one}};\n\n"
                "/// Every message reachable from the stored kinds, sorted by name.\n"
                "#[rustfmt::skip]\n"
                "pub(super) static MESSAGES: &[Message] = &[\n"
                + "\n".join(lines)
                + "\n];\n"
            )
        print(f"wrote {out}: {len(wanted)} messages")
    print("inline:", sorted(INLINE))


main()
