// Moved to net/common/open_acceptor.h; kept until net/tcp/server.cpp includes the
// Listener (net/common/listener.h) instead.
#pragma once

#include "net/common/open_acceptor.h"
