"""Power and money: rack and site power, the cost of owning the hardware, and renting it instead."""
