"""The child count around a call: an orphan the worker adopts (it is pid 1 of its
namespace under bwrap and unshare) is not a child the call started. Real processes: the
script makes itself a child subreaper, which adopts orphans the way a namespace's pid 1 does."""

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import ctypes, json, os, signal, time
    from gatekeeper.behaviour.observe import Census

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:  # detached at "import": forks a sleeper, exits when told
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "86424"])
        os.read(read, 1)
        os._exit(0)
    time.sleep(0.3)
    result = {}

    census = Census()
    os.write(write, b"x")  # the middle process exits during the "call": its sleeper is adopted
    os.waitpid(middle, 0)
    deadline = time.time() + 5
    while time.time() < deadline and len(Census().mine) < 1:
        time.sleep(0.01)
    result["adopted_now_children"] = Census().counts["children"]
    result["adopted"] = [census.counts["children"], Census(census).counts["children"]]

    census = Census()
    fresh = os.fork()
    if fresh == 0:
        time.sleep(30)
        os._exit(0)
    result["started"] = [census.counts["children"], Census(census).counts["children"]]
    for pid in Census().mine:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

    zombie = os.fork()
    if zombie == 0:
        os._exit(0)
    time.sleep(0.3)
    result["zombie"] = Census().counts["children"]
    print(json.dumps(result))
""")


def test_an_adopted_orphan_is_not_counted_and_a_new_child_is():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["adopted_now_children"] == 1  # the sleeper is our child now
    before, after = result["adopted"]
    assert after <= before, result  # ... but the call did not start it
    before, after = result["started"]
    assert after == before + 1, result
    assert result["zombie"] == 0  # an exited, unreaped child is not running
