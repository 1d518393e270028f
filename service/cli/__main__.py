"""``python -m service.cli``: the quotecheck command line."""

from service.cli import main

main()
