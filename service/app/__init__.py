"""The application layer: the operations the API views, the reviewer pages, the command line and the workers all
call. Views stay thin: they read the request, call an operation here, and write the response."""
