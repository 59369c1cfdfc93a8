"""Compiled tree bookkeeping of :mod:`worker.nuts` (numba), one chain at a time.

The sampler's state lives in a few arrays, one row per chain:

- ``pts`` (``C x 6 x W``): points of the trajectory, each packed as
  ``[theta (P), U, grad (P), p (P), p_sharp (P)]`` (``W = 4P + 1``): the last leaf (``EDGE``),
  the trajectory's two ends (``MINUS``, ``PLUS``), its proposal (``PROP``), and the current
  subtree's proposal and first leaf (``SUB_PROP``, ``SUB_START``);
- ``vec`` (``C x 5 x P``): momentum sums of the trajectory and the subtree (``RHO``, ``SUB_RHO``),
  ``p`` and ``p_sharp`` of the previous leaf (``PREV_P``, ``PREV_SHARP``) and the half-step
  momentum of the leapfrog in flight (``PENDING``);
- ``ck`` (``C x K x 5 x P``): checkpoint ``k`` holds the latest leaf whose index in the subtree
  is a multiple of ``2^k`` (``p_sharp``, ``p``, the subtree's momentum sum before it, ``p`` and
  ``p_sharp`` of the leaf before it), for the U-turn checks of every balanced block;
- ``sc`` (``C x 6``) floats and ``ic`` (``C x 5``) integers, indexed by the constants below;
- ``log_u`` (``C x (2K + 2^K)``): the logs of the chain's uniforms for this iteration: two per
  doubling (direction, acceptance of the subtree), then one per leaf;
- ``inv_mass`` (``C x P x P``): each chain's inverse mass matrix, dense (a diagonal metric is a
  diagonal matrix here: at ``P <= 7`` the product costs nothing beside a potential call).

The kernels are compiled once and cached beside this file (numba's ``cache=True``, keyed on
the file's path and time stamp). A cached kernel also names the module it was compiled in: when
that name changes, so must this file, for the kernels to be compiled again.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

EDGE, MINUS, PLUS, PROP, SUB_PROP, SUB_START = range(6)
RHO, SUB_RHO, PREV_P, PREV_SHARP, PENDING = range(5)
H0, LOG_W, SUB_LOG_W, SUM_ACCEPT, N_LEAPFROG, STEP = range(6)
DEPTH, LEAF, FORWARD, DIVERGED, STOPPED = range(5)
LOG_HALF = math.log(0.5)


@njit(cache=True)
def _logaddexp(a: float, b: float) -> float:
    top = max(a, b)
    if top == -math.inf:
        return top
    return top + math.log(math.exp(a - top) + math.exp(b - top))


@njit(cache=True)
def _turned(rho, sharp_a, sharp_b) -> bool:
    """A span with momentum sum ``rho`` turned if ``p_sharp . rho <= 0`` at either end."""
    a = 0.0
    b = 0.0
    for i in range(rho.shape[0]):
        a += sharp_a[i] * rho[i]
        b += sharp_b[i] * rho[i]
    return a <= 0.0 or b <= 0.0


@njit(cache=True)
def _mass_times(m, p, out):
    """``out = m @ p`` for one chain's ``P x P`` inverse mass matrix."""
    P = p.shape[0]
    for i in range(P):
        acc = 0.0
        for j in range(P):
            acc += m[i, j] * p[j]
        out[i] = acc


@njit(cache=True)
def _prepare_leapfrog(c, pts, vec, sc, ic, inv_mass, theta_next):
    """First half of chain ``c``'s next leapfrog, from its last leaf: the half-step momentum
    and the position where the potential is needed."""
    P = inv_mass.shape[1]
    eps = sc[c, STEP] if ic[c, FORWARD] == 1 else -sc[c, STEP]
    edge = pts[c, EDGE]
    p_half = vec[c, PENDING]
    for i in range(P):
        p_half[i] = edge[2 * P + 1 + i] - 0.5 * eps * edge[P + 1 + i]
    m = inv_mass[c]
    for i in range(P):
        acc = 0.0
        for j in range(P):
            acc += m[i, j] * p_half[j]
        theta_next[c, i] = edge[i] + eps * acc


@njit(cache=True)
def _start_subtree(c, pts, vec, sc, ic, log_u, inv_mass, theta_next):
    """Doubling ``depth``: pick a direction and grow from that end of the trajectory."""
    forward = log_u[c, 2 * ic[c, DEPTH]] < LOG_HALF
    ic[c, FORWARD] = 1 if forward else 0
    pts[c, EDGE, :] = pts[c, PLUS if forward else MINUS, :]
    ic[c, LEAF] = 0
    vec[c, SUB_RHO, :] = 0.0
    _prepare_leapfrog(c, pts, vec, sc, ic, inv_mass, theta_next)


@njit(cache=True)
def begin_iterations(rows, p0, theta, U, grad, pts, vec, sc, ic, log_u, inv_mass, theta_next):
    """Start an iteration for chains ``rows`` from their current state with momentum ``p0``."""
    P = theta.shape[1]
    for c in rows:
        point = pts[c, MINUS]
        kinetic = 0.0
        _mass_times(inv_mass[c], p0[c], point[3 * P + 1 :])
        for i in range(P):
            sharp = point[3 * P + 1 + i]
            point[i] = theta[c, i]
            point[P + 1 + i] = grad[c, i]
            point[2 * P + 1 + i] = p0[c, i]
            vec[c, RHO, i] = p0[c, i]
            kinetic += 0.5 * p0[c, i] * sharp
        point[P] = U[c]
        pts[c, PLUS, :] = point
        pts[c, PROP, :] = point
        sc[c, H0] = U[c] + kinetic
        sc[c, LOG_W] = 0.0
        sc[c, SUM_ACCEPT] = 0.0
        sc[c, N_LEAPFROG] = 0.0
        ic[c, DEPTH] = 0
        ic[c, DIVERGED] = 0
        ic[c, STOPPED] = 0
        _start_subtree(c, pts, vec, sc, ic, log_u, inv_mass, theta_next)


@njit(cache=True)
def advance(U, grad, pts, vec, ck, sc, ic, log_u, inv_mass, theta_next, max_delta_h):
    """Finish every chain's leapfrog with the potential ``U`` and gradient ``grad`` at
    ``theta_next``, add the new leaf to its subtree, merge finished subtrees and prepare the next
    leapfrog. Chains whose iteration ended get ``ic[c, STOPPED] = 1`` (and no next leapfrog)."""
    C, P = grad.shape
    K = ck.shape[1]
    for c in range(C):
        eps = sc[c, STEP] if ic[c, FORWARD] == 1 else -sc[c, STEP]
        leaf = pts[c, EDGE]
        kinetic = 0.0
        for i in range(P):
            leaf[i] = theta_next[c, i]
            leaf[P + 1 + i] = grad[c, i]
            leaf[2 * P + 1 + i] = vec[c, PENDING, i] - 0.5 * eps * grad[c, i]
        _mass_times(inv_mass[c], leaf[2 * P + 1 : 3 * P + 1], leaf[3 * P + 1 :])
        for i in range(P):
            kinetic += 0.5 * leaf[2 * P + 1 + i] * leaf[3 * P + 1 + i]
        leaf[P] = U[c]
        delta = U[c] + kinetic - sc[c, H0]
        if math.isnan(delta):
            delta = math.inf
        diverging = delta > max_delta_h
        sc[c, SUM_ACCEPT] += min(1.0, math.exp(-delta))
        sc[c, N_LEAPFROG] += 1.0
        p_leaf = leaf[2 * P + 1 : 3 * P + 1]
        sharp_leaf = leaf[3 * P + 1 :]

        # multinomial sampling within the subtree, leaf by leaf
        n = ic[c, LEAF]
        depth = ic[c, DEPTH]
        if n == 0:
            sc[c, SUB_LOG_W] = -delta
            pts[c, SUB_PROP, :] = leaf
            pts[c, SUB_START, :] = leaf
        else:
            a, b = sc[c, SUB_LOG_W], -delta
            top = max(a, b)
            new_log_w = (
                top + math.log(math.exp(a - top) + math.exp(b - top)) if top > -math.inf else top
            )
            if log_u[c, 2 * K + (1 << depth) - 1 + n] < -delta - new_log_w:
                pts[c, SUB_PROP, :] = leaf
            sc[c, SUB_LOG_W] = new_log_w

        # checkpoints: this leaf starts every balanced block of size 2^k with 2^k | n
        for k in range(K):
            if n % (1 << k) != 0:
                break
            ck[c, k, 0, :] = sharp_leaf
            ck[c, k, 1, :] = p_leaf
            ck[c, k, 2, :] = vec[c, SUB_RHO]
            ck[c, k, 3, :] = vec[c, PREV_P]
            ck[c, k, 4, :] = vec[c, PREV_SHARP]
        for i in range(P):
            vec[c, SUB_RHO, i] += p_leaf[i]
        vec[c, PREV_P, :] = p_leaf
        vec[c, PREV_SHARP, :] = sharp_leaf

        # U-turns of the balanced blocks ending here: block k (2^k leaves) starts at the leaf in
        # checkpoint k; its halves meet at the leaf in checkpoint k - 1, whose predecessor ends
        # the first half
        turned = False
        rho = vec[c, SUB_RHO]
        work = np.empty(P)
        k = 1
        while not turned and k <= K and (n + 1) % (1 << k) == 0:
            start, mid = ck[c, k], ck[c, k - 1]
            for i in range(P):
                work[i] = rho[i] - start[2, i]
            turned = _turned(work, start[0], sharp_leaf)
            if not turned:
                for i in range(P):
                    work[i] = mid[2, i] - start[2, i] + mid[1, i]
                turned = _turned(work, start[0], mid[0])
            if not turned:
                for i in range(P):
                    work[i] = rho[i] - mid[2, i] + mid[3, i]
                turned = _turned(work, mid[4], sharp_leaf)
            k += 1
        if diverging:
            ic[c, DIVERGED] = 1
        invalid = turned or diverging
        ic[c, LEAF] = n + 1
        if invalid or n + 1 == (1 << depth):
            _end_subtree(c, not invalid, pts, vec, sc, ic, log_u, inv_mass, theta_next, K, work)
        else:
            _prepare_leapfrog(c, pts, vec, sc, ic, inv_mass, theta_next)


@njit(cache=True)
def _end_subtree(c, valid, pts, vec, sc, ic, log_u, inv_mass, theta_next, K, work):
    """Merge chain ``c``'s finished subtree into its trajectory (biased progressive sampling),
    check the whole trajectory for a U-turn, then double again or stop the iteration."""
    P = inv_mass.shape[1]
    depth = ic[c, DEPTH]
    turned = False
    if valid:
        if log_u[c, 2 * depth + 1] < sc[c, SUB_LOG_W] - sc[c, LOG_W]:
            pts[c, PROP, :] = pts[c, SUB_PROP]
        forward = ic[c, FORWARD] == 1
        old_start = pts[c, MINUS if forward else PLUS]
        old_end = pts[c, PLUS if forward else MINUS]
        sub_start, leaf = pts[c, SUB_START], pts[c, EDGE]
        rho, sub_rho = vec[c, RHO], vec[c, SUB_RHO]
        sh = 3 * P + 1
        pp = 2 * P + 1
        for i in range(P):
            work[i] = rho[i] + sub_rho[i]
        turned = _turned(work, old_start[sh:], leaf[sh:])
        if not turned:
            for i in range(P):
                work[i] = rho[i] + sub_start[pp + i]
            turned = _turned(work, old_start[sh:], sub_start[sh:])
        if not turned:
            for i in range(P):
                work[i] = sub_rho[i] + old_end[pp + i]
            turned = _turned(work, old_end[sh:], leaf[sh:])
        pts[c, PLUS if forward else MINUS, :] = leaf
        for i in range(P):
            rho[i] += sub_rho[i]
        sc[c, LOG_W] = _logaddexp(sc[c, LOG_W], sc[c, SUB_LOG_W])
    if not valid or turned or depth + 1 >= K:
        ic[c, STOPPED] = 1
        return
    ic[c, DEPTH] = depth + 1
    _start_subtree(c, pts, vec, sc, ic, log_u, inv_mass, theta_next)
