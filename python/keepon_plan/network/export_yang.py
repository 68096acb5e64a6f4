def write_yang(out, net, gcls, rings, departures):
    pass
