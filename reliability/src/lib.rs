//! Sans-IO reliable-datagram sessions for diwarp: sequence numbers, batched ACKs, RTT-based timers,
//! windows and credits, reordering, segmentation and coalescing. No sockets, no clock reads.
//!
//! Empty until the reliability issue; it exists so the workspace has its final shape.
