#!/usr/bin/env python3
"""Lists every flag of an engine's launcher, read from the engine's own source (issue #22).

kvsight classifies each flag of `vllm serve`, `python -m sglang.launch_server`, `llama-server`
and `trtllm-serve` (planner/src/engines/<engine>_launch.cpp); this script writes the list of
flags and how many values each takes, so that list comes from the parser and not from memory:

  scripts/extract-launch-flags.py vllm    DIR   # an unzipped vllm wheel (vllm/engine/arg_utils.py)
  scripts/extract-launch-flags.py sglang  DIR   # an unzipped sglang wheel (sglang/srt/arg_groups/)
  scripts/extract-launch-flags.py llamacpp DIR  # llama.cpp sources (common/arg.cpp)

Output: one flag a line, "ARITY NAME[,ALIAS...]" where ARITY is 0 (a switch), 1 (one value),
? (an optional value) or + (one or more values). The source is read with `ast` (Python) or by
scanning the add_opt(common_arg(...)) calls (C++); nothing is imported or run.
"""
import ast
import pathlib
import re
import sys


def annotation_arity(ann: str) -> str:
    # vllm/engine/arg_utils.py _compute_kwargs: bool|str|None -> nargs "?", bool ->
    # BooleanOptionalAction, list/tuple/set -> nargs "+", everything else one value.
    a = ann.replace(" ", "")
    if "bool" in a and "str" in a:
        return "?"
    if re.search(r"\bbool\b", a) and not re.match(r"^(list|tuple|set|dict)\[", a):
        return "0"
    if any(re.match(r"^(list|tuple|set)\[", part) for part in a.split("|")):
        return "+"
    return "1"


def dataclass_fields(paths):
    fields = {}
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        fields.setdefault(item.target.id, ast.unparse(item.annotation))
    return fields


def vllm(root: pathlib.Path):
    engine_args = root / "vllm/engine/arg_utils.py"
    cli_args = root / "vllm/entrypoints/common/cli_args.py"
    # EngineArgs' own annotations first (they are what get_kwargs reads for its fields).
    fields = dataclass_fields([engine_args])
    config_fields = dataclass_fields(sorted((root / "vllm/config").glob("*.py")))
    out = []
    for path in (engine_args, cli_args):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
                continue
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not names or not names[0].startswith("-"):
                continue
            kw = {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}
            field = None
            for k in node.keywords:
                if k.arg is None:  # **group_kwargs["field"], or {**group_kwargs["field"], ...}
                    for sub in ast.walk(k.value):
                        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant):
                            field = sub.slice.value
                            break
            action = kw.get("action", "")
            if "store_true" in action or "store_false" in action:
                arity = "0"
            elif "BooleanOptionalAction" in action:
                arity = "0"
            elif "nargs" in kw:
                arity = {"'?'": "?", "'+'": "+", "'*'": "+"}.get(kw["nargs"], "1")
            elif field is not None:
                ann = fields.get(field) or config_fields.get(field, "str")
                arity = annotation_arity(ann)
            else:
                arity = "1"
            out.append((arity, names))
            if arity == "0" and field is not None and "action" not in kw:
                # BooleanOptionalAction adds --no-NAME for each long name.
                out.append(("0", ["--no-" + n[2:] for n in names if n.startswith("--")]))
    # FrontendArgs: every field of BaseFrontendArgs and FrontendArgs becomes --field-name.
    tree = ast.parse(cli_args.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("BaseFrontendArgs", "FrontendArgs"):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = "--" + item.target.id.replace("_", "-")
                    arity = annotation_arity(ast.unparse(item.annotation))
                    out.append((arity, [name]))
                    if arity == "0":
                        out.append(("0", ["--no-" + name[2:]]))
    return out


def sglang(root: pathlib.Path):
    out = []
    for path in sorted((root / "sglang/srt/arg_groups/fields").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            ann = node.annotation
            if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") in ("A", "Annotated")):
                continue
            parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            inner = ast.unparse(parts[0])
            meta = parts[1] if len(parts) > 1 else None
            kw = {}
            if isinstance(meta, ast.Call) and getattr(meta.func, "id", "") == "Arg":
                kw = {k.arg: k.value for k in meta.keywords if k.arg}
            elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
                continue
            if "no_cli" in kw and ast.unparse(kw["no_cli"]) == "True":
                continue
            name = ast.literal_eval(kw["cli_name"]) if "cli_name" in kw else "--" + node.target.id.replace("_", "-")
            names = [name] + (ast.literal_eval(kw["aliases"]) if "aliases" in kw else [])
            # arg_utils.py add_cli_args_from_dataclass: an action decides; Optional is unwrapped;
            # list[X] without a type_parser -> nargs "+"; bool -> store_true; else one value.
            bare = re.sub(r"^Optional\[(.*)\]$", r"\1", inner.replace(" ", ""))
            bare = re.sub(r"\|None$", "", bare)
            if "action" in kw:
                action = ast.unparse(kw["action"])
                arity = "0" if ("store_true" in action or "StoreTrue" in action or "store_false" in action) else "1"
            elif "nargs" in kw:
                arity = {"?": "?", "+": "+", "*": "+"}.get(ast.literal_eval(kw["nargs"]), "1")
            elif bare.startswith(("list[", "List[")) and "type_parser" not in kw:
                arity = "+"
            elif bare == "bool":
                arity = "0"
            else:
                arity = "1"
            out.append((arity, names))
    # Manual registrations in ServerArgs.add_cli_args (server_args.py).
    tree = ast.parse((root / "sglang/srt/server_args.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not names or not names[0].startswith("-"):
                continue
            kw = {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}
            action = kw.get("action", "")
            arity = "0" if ("StoreTrue" in action or "store_true" in action) else "1"
            out.append((arity, names))
    return out


def llamacpp(root: pathlib.Path):
    # common/arg.cpp: add_opt(common_arg({"-c", "--ctx-size"}, "N", "help", handler)
    # [.set_examples({...})]...; set_examples restricts the tools that take the flag,
    # set_excludes removes some.
    text = (root / "common/arg.cpp").read_text()
    out = []
    for m in re.finditer(r"add_opt\(common_arg\(", text):
        i = m.end()
        depth, j, in_str = 1, i, None
        while depth and j < len(text):
            c = text[j]
            if in_str:
                if c == "\\":
                    j += 1
                elif c == in_str:
                    in_str = None
            elif c in "\"'":
                in_str = c
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            j += 1
        call = text[i:j]
        # the chained setters up to the statement's end
        end = text.find(";", j)
        tail = text[j:end]
        names_m = re.match(r"\s*\{([^}]*)\}\s*,", call)
        if not names_m:
            continue
        names = re.findall(r'"([^"]+)"', names_m.group(1))
        # The handler's parameters say how many values the flag takes:
        # [](common_params & params) a switch; (..., const std::string & value) one value;
        # (..., const std::string & a, const std::string & b) two.
        # {"--jinja"}, {"--no-jinja"}, ... [](common_params & params, bool value): a switch and
        # its negation.
        rest = call[names_m.end():]
        negated = re.match(r"\s*\{([^}]*)\}\s*,", rest)
        lam = re.search(r"\[[^\]]*\]\s*\(([^)]*)\)", rest)
        hints = lam.group(1).count(",") if lam else 0
        if lam and re.search(r"\bbool\b", lam.group(1)):
            hints = 0
        examples = re.search(r"set_examples\(\{([^}]*)\}", tail)
        excludes = re.search(r"set_excludes\(\{([^}]*)\}", tail)
        if examples and not re.search(r"LLAMA_EXAMPLE_(SERVER|COMMON)\b", examples.group(1)):
            continue
        if excludes and "LLAMA_EXAMPLE_SERVER" in excludes.group(1):
            continue
        out.append((str(min(hints, 2)), names))
        if negated:  # the negation is its own flag (its own rule in kvsight)
            out.append(("0", re.findall(r'"([^"]+)"', negated.group(1))))
    return out


VALUES = {"0": "none", "1": "one", "?": "optional", "+": "many", "2": "two"}


def main():
    engine, root = sys.argv[1], pathlib.Path(sys.argv[2])
    rows = {"vllm": vllm, "sglang": sglang, "llamacpp": llamacpp}[engine](root)
    seen, unique = set(), []
    for arity, names in rows:
        key = tuple(names)
        if key in seen or not names:
            continue
        seen.add(key)
        unique.append((arity, names))
    if len(sys.argv) > 3 and sys.argv[3] == "--cpp":
        # A C++ table for planner/src/engines/<engine>_parser_flags.cpp.
        function, source = sys.argv[4], sys.argv[5]
        print("// Generated by scripts/extract-launch-flags.py " + engine + " from " + source + ";")
        print("// regenerate it from a newer release rather than editing it (issue #22).")
        print('#include "launch_tables.hpp"\n')
        print("namespace kvsight::engine_detail {\n")
        print("const std::vector<ParserFlag>& " + function + "() {")
        print("  static const std::vector<ParserFlag> flags = {")
        for arity, names in unique:
            quoted = ", ".join('"' + n + '"' for n in names)
            print("      {FlagValues::" + VALUES[arity] + ", {" + quoted + "}},")
        print("  };")
        print("  return flags;")
        print("}\n")
        print("}  // namespace kvsight::engine_detail")
        return
    for arity, names in unique:
        print(arity, ",".join(names))


if __name__ == "__main__":
    main()
