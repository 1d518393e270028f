"""rules.estimates.power_cost.currency: the policy's rates told in the quote's currency at a reference rate.

The rate is the European Central Bank's euro reference rate of 14 March 2025, 1 EUR = 1.0889 USD (ECB, Euro
foreign exchange reference rates), the one the default policy carries.
"""

import pytest

from rules.errors import InconsistentInput
from rules.estimates.power_cost.cost import RACK_MONTH, OwnershipRates
from rules.estimates.power_cost.currency import ExchangeRate, from_base, ownership_rates_in, rental_rates_in
from rules.estimates.power_cost.rental import RentalRates

ECB_2025_03_14 = ExchangeRate("EUR", "USD", 1.0889)


def test_an_amount_in_dollars_is_divided_by_the_dollars_a_euro_buys():
    # USD 108.89 at 1.0889 USD per EUR is EUR 100; USD 1 is EUR 0.91836
    assert from_base(108.89, ECB_2025_03_14) == pytest.approx(100.0)
    assert from_base(1.0, ECB_2025_03_14) == pytest.approx(0.918358, abs=1e-6)
    assert ECB_2025_03_14.pair == "USD per EUR"


def test_the_ownership_prices_are_converted_and_the_ratios_are_not():
    # The default policy: USD 0.0806/kWh (EIA 2023), USD 184.06 per kW-month (CBRE H2 2024), PUE 1.56, 5 years, 12 %
    rates = OwnershipRates(5, 0.0806, 1.56, 0.12, facility_basis=RACK_MONTH, facility_per_kw_month=184.06,
                           facility_per_rack_month=2_500.0)

    euros = ownership_rates_in(rates, ECB_2025_03_14)

    # 0.0806 / 1.0889 = 0.074019; 184.06 / 1.0889 = 169.033; 2,500 / 1.0889 = 2,295.90
    assert euros.electricity_per_kwh == pytest.approx(0.074019, abs=1e-6)
    assert euros.facility_per_kw_month == pytest.approx(169.033, abs=1e-3)
    assert euros.facility_per_rack_month == pytest.approx(2_295.90, abs=1e-2)
    assert (euros.pue, euros.amortisation_years, euros.support_fraction_per_year, euros.facility_basis) == (
        1.56, 5, 0.12, RACK_MONTH)


def test_the_rental_rates_are_converted_and_a_missing_kind_stays_missing():
    # H100: USD 12.29 on demand (AWS p5.48xlarge / 8), USD 4.916 reserved (Capacity Blocks), no spot here
    euros = rental_rates_in(RentalRates(on_demand=12.29, reserved=4.916), ECB_2025_03_14)

    # 12.29 / 1.0889 = 11.2866; 4.916 / 1.0889 = 4.5147
    assert euros.on_demand == pytest.approx(11.2866, abs=1e-4)
    assert euros.reserved == pytest.approx(4.5147, abs=1e-4)
    assert euros.spot is None


def test_a_rate_is_positive_and_between_two_currencies():
    with pytest.raises(InconsistentInput, match="exchange rate"):
        ExchangeRate("EUR", "USD", 0.0)
    with pytest.raises(InconsistentInput, match="two currencies"):
        ExchangeRate("USD", "USD", 1.0)
