def add_arguments(p):
    pass


def run(args):
    return 0
