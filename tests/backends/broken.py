"""A deliberately broken external backend (graph level) for tests/external_backends.rs.

It answers correctly for nothing: per case name it misbehaves in one way, so the kit's
reports can be checked: `garbage` (a line that is not JSON), `exit` (the process exits),
`hang` (no answer), `count` (too few outputs), `size` (too few elements), `width` (an
element too wide for its dtype), `error` (an error answer), `unsupported`, and anything
else gets an output of zeros (wrong values).
"""
import json
import sys
import time


def main():
    for line in sys.stdin:
        req = json.loads(line)
        if req["type"] == "hello":
            out = {"type": "hello", "protocol": "uopkit-backend/1", "name": "broken", "level": "graph"}
        else:
            rid, case = req["id"], req["case"]
            outs = [
                {"name": o["name"],
                 "components": [["0x0"] * _numel(o["shape"]) for _ in range(o["devices"])]}
                for o in req["outputs"]
            ]
            if case == "garbage":
                print("this is not json", flush=True)
                continue
            if case == "exit":
                sys.stderr.write("broken: exiting on purpose\n")
                sys.exit(3)
            if case == "hang":
                time.sleep(3600)
            if case == "count":
                outs = []
            if case == "size":
                outs[0]["components"][0] = outs[0]["components"][0][:-1]
            if case == "width":
                outs[0]["components"][0][0] = "0x1ffffffff"
            if case == "error":
                out = {"type": "error", "id": rid, "message": "broken: this case failed on purpose"}
            elif case == "unsupported":
                out = {"type": "unsupported", "id": rid, "reason": "broken: not this one"}
            else:
                out = {"type": "result", "id": rid, "outputs": outs}
        print(json.dumps(out), flush=True)


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


if __name__ == "__main__":
    main()
