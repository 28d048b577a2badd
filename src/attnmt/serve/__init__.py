"""`attnmt serve`: trained runs over HTTP, and a page that shows their attention.

    settings = Settings(beam=5)
    decoders = {"quickstart": RunDecoder("quickstart", load_run("runs/quickstart"), settings)}
    app = create_app(decoders, settings)

`schemas` types the requests and answers (the OpenAPI schema), `worker` queues and batches
the requests of many clients in front of one decoding thread per run, `decoding` turns a
run's translations into answers, `images` does it for runs that read images (the digits
read, the attention as maps over the pixels, the test canvases as examples), `app` is the
FastAPI application and `explorer.html` the page it serves at `/`. docs/serving.md is the
user's guide.
"""

from attnmt.serve.app import create_app
from attnmt.serve.decoding import RunDecoder, Settings
from attnmt.serve.validation import clean_line

__all__ = ["RunDecoder", "Settings", "clean_line", "create_app"]
