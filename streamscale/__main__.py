from streamscale.cli.main import app

app()
