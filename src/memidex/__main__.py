from memidex.cli.main import run

run()
