"""One run of a user's executable (:mod:`clients.ops.commands`): a point's values in the
command's placeholders or on its stdin, y (and its noise, or several outputs) from its last
line, and a failing, silent or slow command reported failed."""

import json

import pytest

from fbgp_al.clients.ops.commands import CommandFailed, CommandRunner, command_for, parse_y


def test_placeholders_stdin_and_output():
    argv, stdin = command_for(["sim", "--a={a}", "{b}", "{json}"], ["a", "b"], [1.5, 2])
    assert argv == ["sim", "--a=1.5", "2.0", '{"a": 1.5, "b": 2.0}'] and stdin is None
    argv, stdin = command_for(["sim"], ["a", "b"], [1.5, 2])
    assert argv == ["sim"] and json.loads(stdin) == {"a": 1.5, "b": 2.0}
    # typed inputs: a choice's text as it is, an int input's integer
    template = ["sim", "{m}", "{n}", "{json}"]
    argv, stdin = command_for(template, ["m", "n", "r"], ["al 6061", 3.0, 1e-3], integers={"n"})
    assert argv == ["sim", "al 6061", "3", '{"m": "al 6061", "n": 3, "r": 0.001}'] and stdin is None
    # a value that reads like a placeholder is put in as it is, not expanded again
    argv, _ = command_for(["sim", "{m}", "{n}", "{m}{n}"], ["m", "n"], ["{n}", 4.0], integers={"n"})
    assert argv == ["sim", "{n}", "4", "{n}4"]
    # a float of rounding noise reaches the command as its shortest decimal
    argv, stdin = command_for(["sim", "{a}"], ["a", "b"], [4.324999999999999, 0.1 + 0.2])
    assert argv == ["sim", "4.325"] and stdin is None
    assert command_for(["sim"], ["a"], [4.7749999999999995])[1] == '{"a": 4.775}'
    argv, _ = command_for(["sim", "{json}"], ["m"], ["{json}"])
    assert argv == ["sim", '{"m": "{json}"}']
    assert parse_y("starting\n  \n3.25\n\n") == 3.25
    assert parse_y("3.25 0.5\n") == (3.25, 0.5)  # y and its noise variance
    for bad in ("", "done\n", "nan\n", "1 2 3\n", "1.0 -0.5\n", "1.0 inf\n"):
        with pytest.raises(CommandFailed):
            parse_y(bad)
    runner = CommandRunner(["sh", "-c", "cat; echo 'x' >&2; exit 2"], ["a"], timeout=10)
    with pytest.raises(CommandFailed, match="exit status 2: x"):
        runner([1.0])
    read = CommandRunner(["sh", "-c", "cat >/dev/null; echo 4.5"], ["a"])
    assert read([1.0]) == 4.5
    slow = CommandRunner(["sleep", "5"], ["a"], timeout=0.3)
    with pytest.raises(CommandFailed, match="timed out"):
        slow([1.0])


def test_a_command_may_print_several_outputs():
    assert parse_y("log\nstress=1.5 disp=2e-3\n") == {"stress": 1.5, "disp": 0.002}
    assert parse_y('{"stress": 1.5, "disp": 0.002}') == {"stress": 1.5, "disp": 0.002}
    assert parse_y("1.5") == 1.5 and parse_y("1.5 0.1") == (1.5, 0.1)
    for bad in ("stress=a", "{not json", "[1, 2]"):
        with pytest.raises(CommandFailed):
            parse_y(bad)


def test_a_runs_level_goes_where_fidelity_stands_and_into_the_json():
    argv, stdin = command_for(["sim", "{x}", "--mesh={fidelity}"], ["x"], [0.5], fidelity="fine")
    assert argv == ["sim", "0.5", "--mesh=fine"] and stdin is None
    argv, stdin = command_for(["sim"], ["x"], [0.5], fidelity="coarse")
    assert json.loads(stdin) == {"x": 0.5, "fidelity": "coarse"}
    argv, _ = command_for(["sim", "{json}"], ["x"], [0.5], fidelity="coarse")
    assert json.loads(argv[1]) == {"x": 0.5, "fidelity": "coarse"}
    level = CommandRunner(["sh", "-c", 'test "$1" = fine && echo 2.5', "sh", "{fidelity}"], ["x"])
    assert level([0.5], fidelity="fine") == 2.5
    with pytest.raises(CommandFailed):
        level([0.5], fidelity="coarse")
