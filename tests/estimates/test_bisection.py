"""The memory searches' bisections ask the same points in the same order whatever the predicate answers."""

from rules.estimates.search.bisection import fewest_fitting, fewest_fitting_by_class, most_fitting


def _asked(search, threshold_fits, bound):
    asked = []

    def fits(n):
        asked.append(n)
        return threshold_fits(n)

    return search(fits, bound), asked


def test_fewest_fitting_asks_the_largest_count_first_then_halves_towards_the_threshold():
    # Given counts 1..16 of which 3 and above fit, the search asks 16, 8, 4, 2 and then 3,
    assert _asked(fewest_fitting, lambda n: n >= 3, 16) == (3, [16, 8, 4, 2, 3])
    # none when the largest count does not fit, whatever the smaller ones would answer,
    assert _asked(fewest_fitting, lambda n: n == 1, 16) == (None, [16])
    # and a predicate true only on a stretch in the middle is bisected all the same: the plain search's answer.
    assert _asked(fewest_fitting, lambda n: n != 8, 16) == (9, [16, 8, 12, 10, 9])


def test_most_fitting_asks_one_then_the_limit_then_halves_towards_the_largest_that_fits():
    assert _asked(most_fitting, lambda n: n <= 10, 64) == (10, [1, 64, 32, 16, 8, 12, 10, 11])
    assert _asked(most_fitting, lambda n: n <= 10, 4) == (4, [1, 4])
    assert _asked(most_fitting, lambda n: False, 64) == (0, [1])
    assert _asked(most_fitting, lambda n: None, 64) == (None, [1])


def test_fewest_fitting_by_class_bisects_each_class_below_the_best_found_so_far():
    def one_then_the_rest(fits, high):  # the classes without fsdp-hybrid: one replica, then two and more
        return fewest_fitting_by_class(fits, high, lambda n: n == 1, 1, 1)

    # Given 1 alone, then 2..16, the search asks 1, then 16 and halves towards the threshold of 2..16,
    assert _asked(one_then_the_rest, lambda n: n >= 3, 16) == (3, [1, 16, 8, 4, 2, 3])
    # and where 1 fits and no other count does, it answers 1 without asking beyond it.
    assert _asked(one_then_the_rest, lambda n: n == 1, 16) == (1, [1])

    def by_parity(fits, high):  # odd counts one class, even counts another
        return fewest_fitting_by_class(fits, high, lambda n: n % 2, 0, 2)

    # Given odd counts fitting from 9 and even ones from 4, the even class is asked only below 9.
    assert _asked(by_parity, lambda n: n >= (9 if n % 2 else 4), 16) == (4, [15, 7, 11, 9, 8, 4, 2])
