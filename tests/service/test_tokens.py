"""Campaign access tokens (:mod:`service.tokens`): each new, long, and never read as a
command-line option."""


def test_a_token_never_starts_like_a_command_line_option():
    """``fbgp-al simulate --token <token>`` and ``fbgp-al run --token <token>``: argparse takes a
    value that starts with "-" for an option (one token in 64 did, at random)."""
    from fbgp_al.service.tokens import PREFIX, new_token

    tokens = [new_token() for _ in range(2000)]
    assert all(t.startswith(PREFIX) and len(t) > 40 for t in tokens)
    assert len(set(tokens)) == len(tokens)
