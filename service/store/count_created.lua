-- Counts a new campaign (KEYS[1]: PHASES) in its phase ARGV[1].
-- needs: count_phases
add_phase(KEYS[1], ARGV[1], 1)
