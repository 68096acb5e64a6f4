def write_taprio(out, net, gcls):
    pass
